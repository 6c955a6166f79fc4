# Makes `calc` importable from the tests when pytest runs from this folder.

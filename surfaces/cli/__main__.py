from surfaces.cli.main import main

main()

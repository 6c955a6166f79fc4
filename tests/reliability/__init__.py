"""The reliability and security suite: the promises of the design, each shown by a test."""

# tests: transforms (see tests/Makefile.inc)

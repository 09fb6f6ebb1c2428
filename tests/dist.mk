# tests: dist (see tests/Makefile.inc)

# tests: backend (see tests/Makefile.inc)

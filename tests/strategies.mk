# tests: strategies (see tests/Makefile.inc)

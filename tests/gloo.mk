# tests: gloo (see tests/Makefile.inc)

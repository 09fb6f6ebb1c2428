# tests: oracle (see tests/Makefile.inc)

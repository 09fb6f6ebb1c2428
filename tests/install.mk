# tests: install + examples (see tests/Makefile.inc)

# tests: train (see tests/Makefile.inc)

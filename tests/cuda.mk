# tests: cuda (see tests/Makefile.inc). On a machine without an NVIDIA
# driver or GPU (CI, the build machine) the cuda plugin must load, say why
# it is unavailable, and leave every other backend working; the script
# skips where the plugin is not built (no toolkit: configure's reason) and
# where a GPU is usable (the GPU checks are tests/gpu's).
TESTS += tests/cuda-unavailable.sh
EXTRA_DIST += tests/cuda-unavailable.sh
AM_TESTS_ENVIRONMENT += \
	export TDM_CUDA_BUILT='$(TDM_CUDA_BUILT)'; \
	export TDM_CUDA_WHY='$(TDM_CUDA_WHY)';

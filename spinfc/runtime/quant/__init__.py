"""Quantization: W8A8 with static activation scales and W4A16 group-wise int4 weights. The schemes (schemes.py),
the linear layers a stack runs them with (linear.py: W8A8; int4.py: W4A16), calibration (calibrate.py), GPTQ
(gptq.py, weight_only.py), checkpoints in the compressed-tensors format (checkpoint.py, reading.py) and
`quantize.quantize_model`, what `spinfc quantize` runs.

The package imports nothing: the stacks import its layers (linear.py, int4.py) while its checkpoints and calibration
import the stacks, so each is imported from its own module."""

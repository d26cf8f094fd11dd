"""Torch-free inference: numpy/scipy pre- and post-processing around ONNX Runtime graphs."""

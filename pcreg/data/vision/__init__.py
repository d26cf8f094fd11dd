"""Image datasets for the ViT and DETR paths."""

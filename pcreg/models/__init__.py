"""Learned models: the registration network, the ViT classifier and the DETR detector."""

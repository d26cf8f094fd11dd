"""Feature extractors: the KPConv FPN for point clouds (the ResNet for DETR lives beside it)."""

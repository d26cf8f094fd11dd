"""DETR on the shared transformer layers: model, Hungarian matcher, set criterion, box ops."""

from pcreg.models.detr.criterion import SetCriterion
from pcreg.models.detr.detr import DETR, DetrConfig, build_detr
from pcreg.models.detr.matcher import HungarianMatcher

__all__ = ["DETR", "DetrConfig", "HungarianMatcher", "SetCriterion", "build_detr"]

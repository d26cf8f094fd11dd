"""Training targets and losses of the registration network (computed outside ``forward``)."""

from pcreg.losses.circle import overlap_aware_circle_loss
from pcreg.losses.point_matching import point_matching_labels, point_matching_loss
from pcreg.losses.targets import NodeTargets, node_targets, sample_node_targets

__all__ = [
    "NodeTargets",
    "node_targets",
    "overlap_aware_circle_loss",
    "point_matching_labels",
    "point_matching_loss",
    "sample_node_targets",
]

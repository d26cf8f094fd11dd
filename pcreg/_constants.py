"""Numeric constants shared by the torch ops and the torch-free runtime (no imports: either side
takes them without pulling in the other's dependencies)."""

__all__ = ["GRID_PHASE"]

#: where the voxel grid's cell boundaries sit, as a fraction of a voxel before each cloud's
#: minimum corner (the golden-ratio fraction). Boundaries through the minimum point itself lie on
#: the data's own lattice when coordinates are quantised (3DMatch's are multiples of 2 mm, so
#: ~4 % of each coordinate fell exactly on a 5 cm boundary, and a change of 1e-7 m in the input
#: moved points between cells and the estimate by ~1 deg); an irrational fraction of the voxel
#: puts the boundaries between the lattice points for any voxel that is a multiple of the
#: quantum (for 2 mm and 5 cm: 0.45 quanta from the nearest point). Used by
#: :func:`pcreg.ops.grid_subsample.grid_subsample` and :func:`pcreg.runtime.pyramid.grid_subsample`.
GRID_PHASE = 0.6180339887498949

"""The PNG figures say what they show: a legend naming source and reference (and the line
colours), readable units, one panel without a transform, the camera fitted to the scene, and
large clouds thinned so that structure survives."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.viz.panels import (
    alignment_panels,
    correspondence_panel,
    pair_legend,
    panels_figure,
    save_alignment_png,
)
from pcreg.viz.render import thin_for_display, view_for
from pcreg.viz.style import REFERENCE_COLOR, SOURCE_COLOR, format_length, hex_color


@pytest.mark.parametrize(
    ("metres", "text"),
    [
        (0.0042, "4.2 mm"),
        (0.036, "3.6 cm"),
        (0.112, "11.2 cm"),
        (3.5, "3.5 m"),
        (12.345, "12.3 m"),
        (1886939.765, "1887 km"),  # a title once read "RTE 188693976.5 cm"
        (-0.05, "-5 cm"),
    ],
)
def test_lengths_read_in_the_unit_of_their_size(metres, text):
    assert format_length(metres) == text


def test_hex_color():
    assert hex_color((1.0, 0.5, 0.0)) == "#ff8000"


def _room(rng, n=4000):
    """A 4 x 3 x 2.5 m box's walls and floor."""
    pts = rng.uniform([0, 0, 0], [4, 3, 2.5], size=(n, 3))
    face = rng.integers(0, 3, n)
    pts[face == 0, 0] = 0.0
    pts[face == 1, 1] = 3.0
    pts[face == 2, 2] = 0.0
    return pts


def _street(rng, n=6000):
    """A 120 x 30 m ground plane with 3 m walls: flat."""
    pts = rng.uniform([-60, -15, 0], [60, 15, 0.2], size=(n, 3))
    walls = rng.random(n) < 0.3
    pts[walls, 1] = np.sign(pts[walls, 1]) * 15
    pts[walls, 2] = rng.uniform(0, 3, walls.sum())
    return pts


def test_a_street_is_drawn_from_above_and_a_room_obliquely(rng):
    street = view_for(_street(rng))
    assert street.overhead and abs(street.front[2]) > 0.99  # looking down z
    assert street.aspect == pytest.approx(30 / 120, abs=0.05)  # long side across
    room = view_for(_room(rng))
    assert not room.overhead


def test_large_clouds_are_thinned_on_a_grid(rng):
    dense = rng.uniform(0, 10, size=(400_000, 3)) * [1, 1, 0.01]
    thin = thin_for_display(dense, 20_000)
    assert 10_000 <= len(thin) <= 22_000
    # a grid keeps the coverage: every 1 m square of the 10 x 10 m still has points
    cells = np.unique(np.floor(thin[:, :2]).astype(int), axis=0)
    assert len(cells) == 100
    small = dense[:500]
    assert thin_for_display(small, 20_000) is not None and len(thin_for_display(small)) == 500


@pytest.mark.open3d
def test_alignment_figure_has_a_legend_naming_both_clouds(rng, tmp_path):
    import matplotlib.pyplot as plt

    ref = _room(rng)
    t = np.eye(4)
    t[:3, 3] = [0.3, -0.2, 0.1]
    src = (ref - t[:3, 3])[::2]
    panels = alignment_panels(src, ref, t)
    assert [name for name, _ in panels] == [
        "before (input poses)",
        "after (source moved by T_ref_src)",
    ]
    fig = panels_figure(panels, title="x", legend=pair_legend("a.ply", "b.ply"))
    texts = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert texts == ["source: a.ply", "reference: b.ply"]
    plt.close(fig)
    # without a transform: one panel, "as given"
    assert [name for name, _ in alignment_panels(src, ref, None)] == ["as given"]
    out = save_alignment_png(tmp_path / "one.png", src, ref, None, names=("a.ply", "b.ply"))
    one = plt.imread(out)
    two = plt.imread(save_alignment_png(tmp_path / "two.png", src, ref, t))
    assert one.shape[1] < 0.75 * two.shape[1]  # golden size: one panel is narrower than two
    assert 300 <= one.shape[0] <= 800 and 300 <= two.shape[0] <= 800


@pytest.mark.open3d
def test_an_object_in_a_scene_gets_a_close_up(rng):
    """A source 20x smaller than the reference is a dot in the whole scene: a third panel
    shows it with the reference around it, and both colours fill a real share of it; a
    source of the reference's size gets none."""
    ref = _room(rng)
    size = float(np.linalg.norm(np.ptp(ref, axis=0)))
    obj = rng.normal(size=(3000, 3))
    obj = obj / np.linalg.norm(obj, axis=1, keepdims=True) * size / 40 + ref.mean(axis=0)
    panels = alignment_panels(obj, ref, np.eye(4))
    assert [name for name, _ in panels][2:] == ["close-up of the source"]

    def orange(image: np.ndarray) -> float:
        image = image[..., :3].astype(float)
        image = image / 255.0 if image.max() > 1.0 else image
        return float((np.abs(image - np.array(SOURCE_COLOR)).sum(axis=-1) < 0.25).mean())

    # the object is no longer a dot: measured 2.5 % of the close-up against 0.2 % after
    assert orange(panels[2][1]) > 5 * orange(panels[1][1])
    big = alignment_panels(ref[::2] + 0.1, ref, np.eye(4))
    assert len(big) == 2


def test_a_long_caption_wraps_within_its_panel():
    """Four panels: the correspondence panel's caption (69 characters) ran off the figure's
    edge; it wraps to its panel's width and every line fits inside the panel."""
    import matplotlib.pyplot as plt

    long = "250 of 633 correspondences: 100% within 10 cm under the truth (green)"
    panels = [(name, np.ones((400, 400, 3))) for name in ("before", "after", "close-up", long)]
    fig = panels_figure(panels, title="x")
    fig.canvas.draw()
    axes = fig.axes
    assert "\n" in axes[3].get_title() and axes[3].get_title().replace("\n", " ") == long
    renderer = fig.canvas.get_renderer()
    box, panel = axes[3].title.get_window_extent(renderer), axes[3].get_window_extent(renderer)
    assert box.x0 >= panel.x0 - 5 and box.x1 <= panel.x1 + 5
    assert box.x1 <= fig.bbox.x1
    plt.close(fig)


@pytest.mark.open3d
def test_correspondences_are_green_within_the_stated_radius_and_pale_beyond(rng):
    ref = _room(rng)
    src = ref.copy()
    good = ref[:60]
    bad_src = ref[60:100]
    bad_ref = bad_src + np.array([0.5, 0.0, 0.0])  # 50 cm off under the truth
    corr = (np.vstack([good, bad_src]), np.vstack([good, bad_ref]))
    caption, image = correspondence_panel(src, ref, np.eye(4), corr, gt=np.eye(4), radius=0.1)
    assert "60 of 100" not in caption and "100 of 100 correspondences: 60% within 10 cm" in caption
    assert "under the truth" in caption
    pixels = image.reshape(-1, 3).astype(int)
    green = (np.abs(pixels - [26, 178, 51]) < 30).all(1).sum()
    pale = (np.abs(pixels - [247, 184, 184]) < 30).all(1).sum()
    assert green > 0 and pale > 0
    # without a truth the estimate judges, and the caption says so
    caption, _ = correspondence_panel(src, ref, np.eye(4), corr, radius=0.6)
    assert "100% within 60 cm under the estimate" in caption


@pytest.mark.open3d
def test_a_small_crop_found_at_the_edge_stays_in_the_correspondence_panel(shared_data):
    """A 0.15 x 0.22 x 0.24 m box of the 3DMatch demo reference (a newcomer's crop) was set
    1.15 scan spans from where it lies and left the picture (its lines ran off the bottom):
    now it sits just beside the reference, and its points are drawn."""
    ref = np.load(shared_data / "geotransformer_repo" / "demo" / "ref.npy").astype(np.float64)
    box = np.array([[-1.177, 0.191, 1.885], [-1.031, 0.409, 2.121]])  # metres
    crop = ref[np.all((ref >= box[0]) & (ref <= box[1]), axis=1)]
    assert len(crop) == 162
    _, image = correspondence_panel(crop, ref, np.eye(4), (crop, crop), radius=0.1)
    pixels = image.reshape(-1, 3).astype(int)
    orange = (np.abs(pixels - [242, 140, 13]) < 40).all(1).sum()
    assert orange > 50, orange


def test_odometry_map_has_a_colour_bar_and_a_marked_trajectory(rng, tmp_path):
    import matplotlib.pyplot as plt

    from pcreg.odometry import save_trajectory_png, trajectory_figure

    poses = np.stack([np.eye(4), np.eye(4)])
    poses[1, :3, 3] = [3.0, 0.5, 0.0]  # two scans: still a line from start to end
    scans = [_street(rng, 2000), _street(rng, 2000)]
    fig = trajectory_figure(poses, scans)
    ax, bar = fig.axes  # the map and its colour bar
    assert "height" in bar.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["trajectory (2 scans)", "start", "end"]
    line = ax.get_lines()[0]
    assert np.allclose(line.get_xydata(), [[0.0, 0.0], [3.0, 0.5]])
    plt.close(fig)
    image = plt.imread(save_trajectory_png(tmp_path / "map.png", poses, scans))
    assert image.shape[:2] == (800, 880)  # golden size


def test_a_maps_views_leave_strays_out_and_show_a_rejected_edge_over_a_kept_one():
    """``map_figure``: a single stray point 40x the map's size away does not stretch the views
    (their frames follow the points but the farthest 0.2 % at each end, and every scan's
    centre), and a rejected edge drawn where a kept one also runs stays visible (red over
    black)."""
    import matplotlib.pyplot as plt

    from pcreg.viz.maps import REJECTED_COLOR, map_figure

    rng = np.random.default_rng(0)
    scans = [rng.normal(size=(3000, 3)) * [1.0, 0.5, 0.2] + [2.0 * k, 0.0, 0.0] for k in range(3)]
    scans[1][0] = [0.0, -80.0, 40.0]  # a stray
    fig = map_figure(scans, kept=[(0, 1), (1, 2), (0, 2)], rejected=[(0, 1)])
    try:
        for ax in fig.axes[:2]:
            (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
            assert x1 - x0 < 12 and y1 - y0 < 12, (ax.get_xlim(), ax.get_ylim())
        fig.canvas.draw()
        rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
        red = np.all(np.abs(rgb - np.array(REJECTED_COLOR)) < 0.12, axis=-1)
        assert red.sum() > 150, red.sum()  # the dashed edge in both views, not just the legend
    finally:
        plt.close(fig)


def test_georeferenced_clouds_are_drawn_as_at_the_origin(rng):
    """The renderer works in float32 (~0.5 m of resolution at a northing of 4.2e6 m): a room
    drawn where it lies came out as sparse bands. Drawn about its own middle, the picture is
    the one of the same room at the origin, a segment included."""
    from pcreg.viz.render import render_clouds

    room = rng.uniform(0, 4, (4000, 3)) * [1.0, 0.75, 0.6]
    far = np.array([5e5, 4.2e6, 100.0])
    segment = (room[:1], room[1:2])
    near_image = render_clouds([(room, (0.9, 0.5, 0.1))], lines=segment, width=300)
    far_image = render_clouds(
        [(room + far, (0.9, 0.5, 0.1))], lines=(segment[0] + far, segment[1] + far), width=300
    )
    assert near_image.shape == far_image.shape
    differ = np.abs(near_image.astype(int) - far_image.astype(int)).max(axis=2) > 40
    assert differ.mean() < 0.002, differ.mean()  # the same pixels, to rounding
    assert (near_image < 200).any(axis=2).mean() > 0.05  # something was drawn


@pytest.mark.open3d
def test_a_crop_of_the_scene_shows_in_its_close_up(rng):
    """A crop of the reference lies exactly on the reference's points: the reference drawn
    over it hid it in the close-up (a newcomer's crop showed two small orange patches; here
    no orange pixel at all). The source is drawn in front, the scene around it still shows:
    measured 0.16 % of the panel orange against 0.39 % blue (the room's points are sparse)."""
    ref = _room(rng, 40000)
    size = float(np.linalg.norm(np.ptp(ref, axis=0)))
    centre = ref[np.argmin(np.linalg.norm(ref - ref.mean(axis=0), axis=1))]
    crop = ref[np.linalg.norm(ref - centre, axis=1) < size / 20]
    close = alignment_panels(crop, ref, np.eye(4))[2][1][..., :3].astype(float)
    close = close / 255.0 if close.max() > 1.0 else close

    def share(color) -> float:
        return float((np.abs(close - np.array(color)).sum(axis=-1) < 0.25).mean())

    orange, blue = share(SOURCE_COLOR), share(REFERENCE_COLOR)
    assert orange > 0.001 and orange > 0.2 * blue, (orange, blue)
    assert blue > 0.001, blue

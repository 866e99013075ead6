"""Figures as files (harness/plotting.py): drawn without a display, written whole, the figure closed; the PNG read
back shows what was drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.plotting import pyplot, save_figure


def test_pyplot_draws_on_the_file_only_backend():
    """Whatever backend was in use before (here another file backend, svg), pyplot() switches to Agg."""
    import matplotlib

    matplotlib.use("svg")
    plt = pyplot()
    assert plt.get_backend().lower() == "agg"


def test_a_saved_figure_is_a_png_of_what_was_drawn_and_is_closed(tmp_path):
    """A figure filled red on the left half, blue on the right: the PNG read back has those colours there; the
    folder is made; the figure is closed after saving and no temporary file is left."""
    plt = pyplot()
    fig = plt.figure(figsize=(2, 1))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_xlim(0, 2)
    ax.set_ylim(0, 1)
    ax.axvspan(0, 1, color="red")
    ax.axvspan(1, 2, color="blue")
    path = tmp_path / "figures" / "two-colours.png"
    number = fig.number
    save_figure(fig, path)
    assert not plt.fignum_exists(number)
    assert [p.name for p in path.parent.iterdir()] == ["two-colours.png"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_mode & 0o777 == 0o644  # readable by every user, as the records are
    image = plt.imread(path)
    height, width = image.shape[:2]
    assert width > height > 20  # 2 x 1 inches at 110 dpi, trimmed to the drawing
    assert image[height // 2, width // 4, :3].tolist() == pytest.approx([1, 0, 0], abs=0.02)
    assert image[height // 2, 3 * width // 4, :3].tolist() == pytest.approx([0, 0, 1], abs=0.02)


def test_a_figure_that_fails_to_save_leaves_the_old_file_and_no_temporary(tmp_path):
    """The PNG is written to a temporary file and renamed: if saving fails half-way, the previous figure stays as it
    was, nothing else is left behind, and the figure is still closed."""
    plt = pyplot()
    path = tmp_path / "fig.png"
    path.write_bytes(b"old figure")
    fig = plt.figure()
    fig.add_subplot().plot([0, 1], [0, 1])

    def broken(fname, *args, **kwargs):  # writes part of a PNG, then fails
        Path(fname).write_bytes(b"\x89PNG half")
        raise RuntimeError("disk full")

    fig.savefig = broken
    with pytest.raises(RuntimeError, match="disk full"):
        save_figure(fig, path)
    assert path.read_bytes() == b"old figure"
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]
    assert not plt.fignum_exists(fig.number)

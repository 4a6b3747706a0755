import torch

from tests.conftest import tiny_model
from transformer.decoding.heatmaps import heatmap, save_figure


def test_cross_attention_is_a_distribution_over_real_source_tokens():
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 2, 0, 0], [5, 6, 7, 8, 9, 2]])
    tgt_in = torch.tensor([[1, 4, 5], [1, 6, 7]])
    weights = model.cross_attention(src, tgt_in)  # (layers, B, H, T, S)
    assert weights.shape == (2, 2, 4, 3, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, 3))
    assert torch.all(weights[:, 0, :, :, 4:] == 0)


def test_heatmap_png_is_written(tmp_path):
    fig = heatmap(torch.rand(3, 4), ["▁il", "▁est", "▁là", "</s>"], ["▁he", "▁is", "</s>"], "test")
    save_figure(fig, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_alignment_links_are_framed_on_their_cells():
    from matplotlib.patches import Rectangle

    links = [(0, 1), (1, 0), (2, 3)]  # (target piece, source piece)
    fig = heatmap(torch.rand(3, 4), ["▁il", "▁est", "▁là", "</s>"], ["▁he", "▁is", "</s>"], "test", links)
    frames = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert sorted((round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in frames) == sorted(links)
    assert all(p.get_edgecolor()[:3] == (1.0, 0.0, 0.0) for p in frames)

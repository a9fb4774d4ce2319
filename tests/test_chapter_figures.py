"""bookkit.figures' chapter figures: the counts they draw, and the figures themselves."""
import matplotlib

matplotlib.use("agg")
import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bookkit import figures  # noqa: E402


@pytest.mark.parametrize("n, k", [(2, 1), (4, 2), (8, 3), (9, 3), (12, 12)])
def test_timelines_count_what_each_strategy_holds(n, k):
    t = figures.saved_bytes_timelines(n, k)
    keep, off, ckpt = t["keep"], t["offload"], t["checkpoint"]
    assert max(keep["device"]) == n and keep["device"][-1] == 0 and len(keep["device"]) == 2 * n
    assert max(off["device"]) == 1 and off["device"][-1] == 0
    # Offloading moves the same activations: accelerator + host = keeping everything.
    assert [d + h for d, h in zip(off["device"], off["host"])] == keep["device"]
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    assert ckpt["recomputed"] == n - sizes[-1]
    assert len(ckpt["device"]) == 2 * n + ckpt["recomputed"] and ckpt["device"][-1] == 0
    # Rebuilding segment i holds the inputs of segments 1..i and its own activations.
    assert max(ckpt["device"]) == max(i + size for i, size in enumerate(sizes))
    assert min(ckpt["device"][:-1]) >= 1 and not any(ckpt["host"])


@pytest.mark.parametrize("bad", [(1, 1), (4, 0), (4, 5), (4.0, 2)])
def test_timelines_refuse_bad_shapes(bad):
    with pytest.raises(ValueError, match="n_layers|segments"):
        figures.saved_bytes_timelines(*bad)


def test_offload_figure_stacks_two_panels_at_book_size():
    with mpl.rc_context(figures.BOOK_RC):
        fig = figures.offload_vs_checkpoint()
        dev, host = fig.axes
        assert len(dev.lines) == 3 and len(host.lines) == 1  # only offloading uses the host
        texts = [dev.title, dev.yaxis.label, host.xaxis.label,
                 *dev.get_legend().get_texts(), *host.get_yticklabels()]
        assert min(t.get_fontsize() for t in texts) >= 11
        assert "+6 forwards" in dev.get_legend().get_texts()[2].get_text()  # 8 - 2 layers
        plt.close(fig)


def test_memory_figure_draws_the_calculator_totals():
    pytest.importorskip("transformers")
    from bookkit import calculator

    with mpl.rc_context(figures.BOOK_RC):
        fig = figures.memory_by_kind("GPT-2 (124M)", batch_size=2, seq_len=128)
        ax = fig.axes[0]
        bars = ax.patches
        assert len(bars) == 4 * len(figures.RECIPES)
        config = calculator.PRESETS["GPT-2 (124M)"]()
        for row, (_, precision, recompute) in enumerate(figures.RECIPES):
            est = calculator.estimate_training_memory(
                config, batch_size=2, seq_len=128, precision=precision, recompute=recompute)
            widths = [b.get_width() for b in bars[4 * row:4 * row + 4]]
            assert sum(widths) == pytest.approx(est["total"] / 2 ** 30, rel=1e-12)
        plt.close(fig)
    with pytest.raises(ValueError, match="unknown model"):
        figures.memory_by_kind("GPT-5")


MIB = 2 ** 20
STEP = {  # a made-up step: 2 MiB of states, a 4 MiB spike in the loss
    "bytes": [2 * MIB, 3 * MIB, 4 * MIB, 6 * MIB, 4 * MIB, 3 * MIB, 2.5 * MIB, 2.5 * MIB],
    "marks": {"logits": 2, "forward": 3, "loss backward": 4, "layer 1 backward": 5,
              "backward": 6, "optimizer": 7},
    "phases": {"forward": (0, 2), "loss": (2, 4), "backward": (4, 6), "optimizer": (6, 7)},
    "phase_peaks": {"forward": (2, 4 * MIB), "loss": (3, 6 * MIB),
                    "backward": (4, 4 * MIB), "optimizer": (6, 2.5 * MIB)},
    "peak": 6 * MIB, "peak_phase": "loss", "start": 2 * MIB,
}


def test_phase_positions_give_every_phase_one_unit():
    assert figures.phase_positions(STEP["phases"]) == [0, 0.5, 1, 1.5, 2, 2.5, 3, 4]
    with pytest.raises(ValueError, match="follow each other"):
        figures.phase_positions({"a": (0, 2), "b": (3, 4)})
    with pytest.raises(ValueError, match="follow each other"):
        figures.phase_positions({"a": (1, 2)})


def test_step_trace_figure_draws_the_measurement_and_the_prediction_where_they_belong():
    estimate = {"timeline": {"start": 2 * MIB, "forward": 4.5 * MIB,
                             "layer 1 backward": 3 * MIB, "not a mark": 9 * MIB},
                "peak": 5 * MIB}
    with mpl.rc_context(figures.BOOK_RC):
        fig = figures.step_memory_trace(STEP, estimate)
        (ax,) = fig.axes
        measured, predicted, peak_line, phase_peaks = ax.lines
        assert max(measured.get_ydata()) == 6 and len(measured.get_xdata()) == 8
        # Predicted points at the trace's marks (x in phase units), unknown names left out.
        assert list(predicted.get_xdata()) == [0, 1.5, 2.5]
        assert list(predicted.get_ydata()) == [2, 4.5, 3]
        assert list(peak_line.get_ydata()) == [5, 5]
        assert list(phase_peaks.get_xdata()) == [1, 1.5, 2, 3]
        assert list(phase_peaks.get_ydata()) == [4, 6, 4, 2.5]
        assert [t.get_text() for t in ax.texts[:4]] == ["forward", "loss", "backward",
                                                        "optimizer"]
        texts = [ax.xaxis.label, ax.yaxis.label, *ax.texts, *ax.get_legend().get_texts(),
                 *ax.get_yticklabels()]
        assert min(t.get_fontsize() for t in texts) >= 11
        assert fig.get_size_inches()[0] <= 7
        plt.close(fig)
    with pytest.raises(ValueError, match="phase_peaks"):
        figures.step_memory_trace({k: v for k, v in STEP.items() if k != "phase_peaks"},
                                  estimate)
    with pytest.raises(ValueError, match="estimate has no 'peak'"):
        figures.step_memory_trace(STEP, {"timeline": {}})
    with pytest.raises(ValueError, match="cover 8 events"):
        figures.step_memory_trace({**STEP, "bytes": STEP["bytes"][:-1]}, estimate)


def test_collective_timelines_draw_one_tick_per_event_in_its_colour():
    timelines = {"FSDP1, hand-written reentrant": ["all-gather", "recompute", "all-gather",
                                                    "backward", "reduce-scatter"],
                 "FSDP2, integration": ["all-gather", "recompute", "backward"]}
    with mpl.rc_context(figures.BOOK_RC):
        fig = figures.collective_timelines(timelines)
        ax = fig.axes[0]
        assert len(ax.patches) == 8
        first_row = ax.patches[:5]
        assert [mpl.colors.to_hex(p.get_facecolor()) for p in first_row] == [
            mpl.colors.to_hex(figures.TIMELINE_COLORS[e]) for e in timelines[
                "FSDP1, hand-written reentrant"]]
        # Collectives tall, recomputation and backward short; strips one row apart.
        assert [p.get_height() for p in first_row] == [0.8, 0.5, 0.8, 0.5, 0.8]
        assert ax.patches[5].get_y() == -1 - 0.4
        assert [t.get_text() for t in ax.get_legend().get_texts()] == list(figures.TIMELINE_COLORS)
        plt.close(fig)


def test_residuals_by_kind_stack_each_kind_once_and_write_the_flops():
    from types import SimpleNamespace as R

    kept = {"no checkpoint": [R(what="output of max", nbytes=4096),
                              R(what="output of div", nbytes=4096),
                              R(what="from the argument x", nbytes=1024)],
            "nothing_saveable": [R(what="from the argument x", nbytes=1024),
                                 R(what="not a kind the figure knows", nbytes=99)]}
    with mpl.rc_context(figures.BOOK_RC):
        fig = figures.residuals_by_kind(kept, {"no checkpoint": 1.5e9,
                                               "nothing_saveable": 2.0e9}, xmax=20)
        ax = fig.axes[0]
        # nothing_saveable drawn first (bottom), one patch per non-empty kind.
        assert [p.get_width() for p in ax.patches] == [1.0, 1.0, 4.0, 4.0]
        assert [t.get_text() for t in ax.texts] == ["2.000 GFLOP", "1.500 GFLOP"]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["model input", "ReLU output", "ReLU derivative"]  # each once
        assert ax.get_xlim() == (0, 20)
        plt.close(fig)


def test_scatter_colours_members_and_shapes_groups():
    points = {("naive", "none"): (0, 60), ("naive", "full"): (30, 4),
              ("fused", "none"): (0, 40), ("fused", "full"): (25, 4)}
    with mpl.rc_context(figures.BOOK_RC):
        ax = figures.scatter(points, xlabel="extra FLOPs (%)", ylabel="held",
                             legend="upper right", legend_cols=2)
        lines = ax.get_lines()
        assert [tuple(line.get_xydata()[0]) for line in lines] == list(points.values())
        colors = [line.get_color() for line in lines]
        assert colors[0] == colors[2] != colors[1] == colors[3]  # one colour per member
        assert [line.get_marker() for line in lines] == ["o", "o", "s", "s"]
        assert lines[2].get_markerfacecolor() == "none" != lines[0].get_markerfacecolor()
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert texts == ["none", "full", "naive", "fused"]
        assert ax.figure.get_size_inches()[0] == figures.FIGURE_WIDTH_IN
        plt.close(ax.figure)


@pytest.mark.parametrize("bad", [{"none": (0, 1)}, {(g, "m"): (0, 1) for g in "abcdef"}])
def test_scatter_refuses_bad_keys(bad):
    with pytest.raises(ValueError, match="keyed|groups"):
        figures.scatter(bad)

"""The rich bridge, against a fake supervisor, and through the start-up hook."""

import io


from conftest import per_bar as shared_per_bar
from test_tqdm_bridge import probe

import rich.progress as rich_progress  # installed by scripts/setup: missing is a failure, not a skip
from rich.console import Console  # noqa: E402
from overtime_worker import rich_bridge  # noqa: E402

rich_bridge.patch()


def per_bar(supervisor):
    return shared_per_bar(supervisor, "rich")


def quiet_progress(**kwargs):
    return rich_progress.Progress(console=Console(file=io.StringIO()), auto_refresh=False, **kwargs)


def test_patching_twice_is_harmless():
    assert rich_bridge.patch() is False


def test_each_task_is_its_own_bar(supervisor):
    with quiet_progress() as progress:
        epochs = progress.add_task("[bold]Epochs", total=3)
        batches = progress.add_task("Batches", total=10)
        progress.advance(batches, 4)
        progress.update(batches, advance=2)
        progress.update(epochs, completed=1)
        bars = per_bar(supervisor)
        assert [(s["title"], s["completed"], s["total"]) for s in bars.values()] == [("Batches", 6, 10), ("Epochs", 1, 3)]
        progress.reset(batches, total=10)   # the next epoch: the same bar from 0
        progress.advance(batches)
        bars = per_bar(supervisor)
        assert len(bars) == 2 and list(bars.values())[-1]["completed"] == 1


def test_track_reports_and_a_disabled_progress_too(supervisor):
    with quiet_progress(disable=True) as progress:
        for _ in progress.track(range(30), description="Scoring"):
            pass
    bars = per_bar(supervisor)
    assert list(bars.values()) == [{"type": "progress", "bar": list(bars)[0], "completed": 30, "total": 30,
                                    "title": "Scoring"}]


def test_rich_track_through_the_hook():
    modules, sent = probe("import io\nfrom rich.progress import track\nfrom rich.console import Console\n"
                          "for _ in track(range(20), description='Work', console=Console(file=io.StringIO())):\n"
                          "    pass")
    assert modules["after"]["overtime_worker"] is True
    progress = [m for m in sent if m["type"] == "progress"]
    assert progress[-1] == {"type": "progress", "completed": 20, "total": 20, "title": "Work", "bar": "rich-1"}


def test_the_rich_bridge_alone_can_be_turned_off():
    _, sent = probe("import io\nfrom rich.progress import track\nfrom rich.console import Console\n"
                    "for _ in track(range(5), console=Console(file=io.StringIO())): pass", OVERTIME_RICH="0")
    assert sent == []

"""Run artefacts of a rank whose process cannot write the controller's
directory: written to a private directory, sent as one ``messages.Files``
(which crosses the wire unchanged), written by the controller under its
root -- never outside it -- and the private directory removed."""
import os

import pytest

from tilecomm.errors import RuntimeFault
from tilecomm.runtime import messages as M
from tilecomm.runtime.controller.artefacts import write_files
from tilecomm.runtime.rank.artefacts import DfxSettings, RankArtefacts


class _Context:
    """What RankArtefacts needs of a rank context when nothing is recorded."""

    transport = None


def _settings(root):
    return DfxSettings(str(root), swimlane=0, dump_args=0, dep_gen=False, scope_stats=False,
                       origin_ns=0, title="t")


def test_a_shipping_rank_writes_privately_and_sends_every_file(tmp_path):
    dest = tmp_path / "dfx_outputs"
    sent = []
    dfx = RankArtefacts(2, _settings(dest), _Context(), ship=sent.append)
    private = dfx.s.root
    assert os.path.isdir(private) and not private.startswith(str(tmp_path))
    files = {"rank2/d0/deps.json": b'{"rank": 2}', "rank2/d1/args_dump/after/00_x.npy": b"\x93"}
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(private, rel)), exist_ok=True)
        with open(os.path.join(private, rel), "wb") as f:
            f.write(data)
    dfx.finish()
    assert not os.path.exists(private)
    (msg,) = sent
    assert msg.root == str(dest) and dict(msg.files) == files
    write_files(M.decode(M.encode(msg)))          # as the controller receives it
    for rel, data in files.items():
        assert (dest / rel).read_bytes() == data


def test_a_rank_that_does_not_ship_writes_in_place(tmp_path):
    dfx = RankArtefacts(0, _settings(tmp_path), _Context())
    assert dfx.s.root == str(tmp_path)
    dfx.finish()
    dfx.close()                                   # nothing of its own to remove
    assert os.path.isdir(tmp_path)


def test_a_stopped_shipping_rank_removes_its_directory(tmp_path):
    dfx = RankArtefacts(1, _settings(tmp_path), _Context(), ship=lambda m: None)
    dfx.close()
    assert not os.path.exists(dfx.s.root)


@pytest.mark.parametrize("rel", ["../outside.json", "rank1/../../outside.json",
                                 "/tmp/absolute.json"])
def test_files_never_land_outside_the_root(tmp_path, rel):
    root = tmp_path / "dfx_outputs"
    root.mkdir()
    with pytest.raises(RuntimeFault, match="leaves") as ei:
        write_files(M.Files(str(root), ((rel, b"x"),)))
    assert ei.value.code == "TC443"
    assert not (tmp_path / "outside.json").exists()

"""The trainer under DDP: 2 processes, gloo backend on CPU (as torchrun would start them)."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from g2g_model.training.smoke_data import make_smoke_collection, smoke_config
from g2g_model.training.trainer import Trainer


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank, world, port, root, out, result_dir):
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    config = smoke_config(root, out, data={"max_pairs": 16})
    trainer = Trainer(config, progress=False, trace=True)
    try:
        initial = {k: v.clone() for k, v in trainer.g2g.state_dict().items()}
        summary = trainer.run()
        torch.save({"seen": trainer.seen, "summary": summary, "initial": initial,
                    "weights": trainer.g2g.state_dict()}, f"{result_dir}/rank{rank}.pt")
    finally:
        trainer.close()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def test_two_gloo_ranks_see_different_data_and_end_identical(smoke, tmp_path):
    mp.spawn(_worker, args=(2, _free_port(), str(smoke), str(tmp_path / "out"), str(tmp_path)),
             nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert r0["summary"]["end_step"] == r1["summary"]["end_step"] == 10
    assert len(r0["seen"]) == len(r1["seen"]) == 10
    # each epoch is split between the ranks: the first batches of both ranks are disjoint
    first0 = set(r0["seen"][0] + r0["seen"][1])
    first1 = set(r1["seen"][0] + r1["seen"][1])
    assert first0 and not first0 & first1
    assert all(a != b for a, b in zip(r0["seen"], r1["seen"]))
    for key, value in r0["weights"].items():
        torch.testing.assert_close(r1["weights"][key], value, rtol=0, atol=0, msg=key)
    # the ranks really trained: weights moved away from the shared initialisation
    moved = [k for k, v in r0["weights"].items() if not torch.equal(v, r0["initial"][k])]
    assert len(moved) > len(r0["weights"]) // 2
    assert (tmp_path / "out" / "model.safetensors").is_file()

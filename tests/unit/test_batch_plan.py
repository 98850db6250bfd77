"""The batches of a sweep are fixed by the experiment file and the batch
size alone (host/batches.py, docs/determinism.md "Batches"): not by which
runs are pending, by how the sweep is sharded or by --jobs (which the plan
does not take); an invocation loads a batch from its first run up to the
last run it stores, replaying the rest."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import write_yaml
from tortoiselab.host import batches
from tortoiselab.spec.experiment import expand, load, run_order

EXP = """
name: plan
repetitions: 4
seed: 11
server: {cc: reno_beta}
sweep:
  server.module_params: [{reno_beta: {beta: 0.5}}, {reno_beta: {beta: 0.7}}, {reno_beta: {beta: 0.9}}]
  path.loss_pct: [0, 1]
"""


def _order(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    exp = load(write_yaml(d, EXP))
    return run_order(exp, expand(exp))


def test_membership_is_run_order_by_boot_key_in_chunks(tmp_path_factory):
    from tortoiselab.host.pageload import boot_key

    order = _order(tmp_path_factory)
    assert len(order) == 24
    fixed = batches.fixed_batches(order, 3)
    assert sorted(len(b.runs) for b in fixed) == [2] * 3 + [3] * 6  # 8 runs per boot key: chunks of 3, 3, 2
    assert sorted(r.run_id for b in fixed for r in b.runs) == sorted(r.run_id for r in order)
    for b in fixed:
        assert len({boot_key(r) for r in b.runs}) == 1
        assert [order.index(r) for r in b.runs] == sorted(order.index(r) for r in b.runs)
        assert b.id == batches.batch_id(b.run_ids) and len(b.id) == 16
    assert len({b.id for b in fixed}) == len(fixed)
    # the same file, the same batches (a fresh expansion: nothing kept between calls)
    again = batches.fixed_batches(_order(tmp_path_factory), 3)
    assert [(b.id, b.run_ids) for b in again] == [(b.id, b.run_ids) for b in fixed]


@pytest.mark.parametrize("keys,size,counts", [
    ([6], 8, [2]),  # quick.yaml: one boot key of 6 runs, two batches of 3 (MIN_BATCHES)
    ([1], 8, [1]),  # one run: one batch
    ([760], 8, [95]),
    ([9], 8, [2]),  # 5 + 4, not 8 + 1
    ([5, 5], 8, [1, 1]),  # two keys are two batches already
    ([2, 7], 8, [1, 1]),
    ([7, 2], 3, [3, 1]),
    ([4], 1, [4]),
])
def test_batch_counts(keys, size, counts):
    assert batches.batch_counts(keys, size) == counts


@settings(max_examples=80, deadline=None)
@given(keys=st.lists(st.integers(1, 40), min_size=1, max_size=5), size=st.integers(1, 12))
def test_batch_counts_bound_the_size_and_fill_two_cores(keys, size):
    counts = batches.batch_counts(keys, size)
    assert all(1 <= k <= n for k, n in zip(counts, keys))
    assert all(-(-n // k) <= size for k, n in zip(counts, keys))  # no batch above the size
    assert sum(counts) >= min(batches.MIN_BATCHES, sum(keys))
    # no more batches than the size and the floor need
    assert sum(counts) == max(sum(-(-n // size) for n in keys), min(batches.MIN_BATCHES, sum(keys)))


def test_batches_are_near_equal_consecutive_runs(tmp_path_factory):
    order = _order(tmp_path_factory)
    fixed = batches.fixed_batches(order, 5)  # 8 runs per boot key: 4 + 4, not 5 + 3
    assert sorted(len(b.runs) for b in fixed) == [4] * 6


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 9), data=st.data())
def test_pending_runs_and_shards_do_not_move_a_run_in_its_batch(tmp_path_factory, size, data):
    order = _order(tmp_path_factory)
    ids = [r.run_id for r in order]
    fixed = batches.fixed_batches(order, size)
    place = {r: (b.id, k) for b in fixed for k, r in enumerate(b.run_ids)}
    pending = data.draw(st.sets(st.sampled_from(ids)), label="pending")
    work = batches.plan_work(fixed, pending)
    # every pending run stored once, after exactly its batch's runs before it
    assert sorted(r for w in work for r in w.store) == sorted(pending)
    for w in work:
        assert w.batch in fixed and list(w.loads) == list(w.batch.runs[:len(w.loads)])
        assert w.loads[-1].run_id in w.store and set(w.replays) == {r.run_id for r in w.loads} - w.store
        for k, r in enumerate(w.loads):
            assert place[r.run_id] == (w.batch.id, k)
    # shards take whole batches: disjoint, together every run, no batch in two shards
    n = data.draw(st.integers(1, 6), label="shards")
    slices = [batches.shard_of_batches(fixed, ids, (i, n)) for i in range(1, n + 1)]
    assert sorted(r for s in slices for r in s) == sorted(ids)
    held = [{place[r][0] for r in s} for s in slices]
    assert all(not (held[i] & held[j]) for i in range(n) for j in range(i + 1, n))
    # a shard worked out after some runs are stored is the same shard (it does not follow what is pending)
    assert [batches.shard_of_batches(fixed, ids, (i, n)) for i in range(1, n + 1)] == slices


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 9), stored=st.integers(0, 24))
def test_a_resume_replays_the_stored_runs_of_a_batch_it_continues(tmp_path_factory, size, stored):
    """The runner stores runs in batch order (in_batch_order), so --limit N
    stops after a batch's first runs; the next invocation loads the batch
    again from its first run."""
    order = _order(tmp_path_factory)
    fixed = batches.fixed_batches(order, size)
    in_order = batches.in_batch_order(fixed, [r.run_id for r in reversed(order)])
    assert in_order == [r for b in fixed for r in b.run_ids]
    done, rest = set(in_order[:stored]), in_order[stored:]
    work = batches.plan_work(fixed, rest)
    assert [r for w in work for r in w.replays] == [r for w in work for r in w.batch.run_ids if r in done
                                                    and w.batch.run_ids.index(r) < len(w.loads)]
    assert sum(len(w.replays) > 0 for w in work) <= 1  # only the batch the last invocation stopped in


def test_boot_prefix_is_the_batch_up_to_the_run(tmp_path_factory):
    order = _order(tmp_path_factory)
    b = batches.fixed_batches(order, 8)[0]
    assert batches.boot_prefix(b.runs, b.run_ids[3]) == list(b.runs[:4])
    assert batches.boot_prefix(b.runs, b.run_ids[0]) == [b.runs[0]]
    try:
        batches.boot_prefix(b.runs[:2], b.run_ids[3])
    except ValueError as exc:
        assert "not in its recorded batch" in str(exc)
    else:
        raise AssertionError("a run outside its batch")

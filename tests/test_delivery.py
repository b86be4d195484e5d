"""The delivery ledger on a real redis-server, with real Celery messages on the queue: which waiting
shards are overdue, the queue's watermark, a restart read from the data, a lost reduce, and what
``status`` says about waiting shards and a stall."""

from __future__ import annotations

import time

import redis

from engine.broker import DRAINED
from engine.delivery import NEVER, Delivery, message_ids
from engine.keys import run_keys, server_key
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from producer.results.status_view import waiting_lines
from producer.results.stored_run import run_status
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.status import ShardState
from tests.engine_support import wait_until
from viewer.data import ViewerData
from worker.app import TASK_EXECUTE, make_app

S = ShardState
RUN = "r1"


def _submitted(settings: Settings, shards: list[str]) -> tuple[redis.Redis, RunState, Delivery]:
    """Shards registered, one execute message each published in order, and confirmed, as submit does."""
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    state.register(RUN, shards, "runs/r1/manifest.json", "now")
    app = make_app(settings)
    for shard in shards:
        app.send_task(TASK_EXECUTE, args=[RUN, shard], queue=QUEUE_EXECUTE)
    state.mark_sent(RUN, shards)
    return client, state, Delivery(client)


def test_the_queue_messages_name_their_run_and_shard(settings: Settings) -> None:
    client, _, _ = _submitted(settings, ["a"])
    assert message_ids(client.lindex(QUEUE_EXECUTE, -1)) == (RUN, "a")
    assert message_ids(b"not json") is None


def test_a_shard_still_in_its_queue_is_never_overdue_however_long_it_waits(settings: Settings) -> None:
    client, _, delivery = _submitted(settings, ["a", "b", "c"])
    marks = delivery.watermarks()
    assert marks[0] == client.zscore(run_keys(RUN).waiting, "a")  # the oldest message's send time
    assert marks[1] == DRAINED  # nothing waits on the grade queue
    assert delivery.overdue(RUN, marks) == []


def test_a_message_popped_and_never_claimed_makes_its_shard_overdue_once_the_bound_passed(
    settings: Settings,
) -> None:
    client, _, delivery = _submitted(settings, ["a", "b", "c"])
    client.rpop(QUEUE_EXECUTE)  # a worker took "a" and died before claiming it
    assert delivery.watermarks_seen(0.5) == (NEVER, NEVER)  # no watermark seen that long ago yet
    assert delivery.overdue(RUN, (NEVER, NEVER)) == []
    time.sleep(0.6)
    marks = delivery.watermarks_seen(0.5)  # "a" had left the queue half a second ago: its taker had its time
    assert marks[0] == client.zscore(run_keys(RUN).waiting, "b")
    assert delivery.overdue(RUN, marks) == [("a", S.QUEUED)]
    assert delivery.overdue(RUN, marks) == []  # re-dated: not sent twice
    assert delivery.overdue(RUN, delivery.watermarks()) == []  # its new message has not left the queue


def test_a_watermark_past_now_is_kept_as_it_is(settings: Settings) -> None:
    """A batch's send times run a thousandth of a millisecond apart and can lie past the clock (a
    sample taken within the batch's millisecond, or a batch over a thousand): the queue's
    watermark is still the oldest waiting message's send time, and what left before it is due."""
    client, _, delivery = _submitted(settings, ["a", "b", "c"])
    sent_a = client.zscore(run_keys(RUN).waiting, "a")
    assert sent_a is not None
    for offset, shard in ((60_000.0, "b"), (60_000.001, "c")):  # as if sent a minute past now
        client.zadd(run_keys(RUN).waiting, {shard: sent_a + offset})
    client.rpop(QUEUE_EXECUTE)  # a worker took "a" and died before claiming it
    delivery.watermarks_seen(0.5)
    time.sleep(0.6)
    marks = delivery.watermarks_seen(0.5)
    assert marks[0] == client.zscore(run_keys(RUN).waiting, "b")
    assert delivery.overdue(RUN, marks) == [("a", S.QUEUED)]


def test_a_drained_queue_makes_every_old_enough_waiting_shard_overdue(settings: Settings) -> None:
    client, _, delivery = _submitted(settings, ["a", "b"])
    client.delete(QUEUE_EXECUTE)
    time.sleep(0.01)  # a batch's send times are a thousandth of a millisecond apart, up to now
    assert delivery.watermarks()[0] == DRAINED
    assert sorted(delivery.overdue(RUN, delivery.watermarks())) == [("a", S.QUEUED), ("b", S.QUEUED)]


def test_claimed_and_ended_shards_leave_the_ledger_and_stale_messages_are_skipped(settings: Settings) -> None:
    client, state, delivery = _submitted(settings, ["a", "b", "c"])
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok", ttl_s=60)  # "a" is at the queue's tail still
    assert client.zscore(run_keys(RUN).waiting, "a") is None
    assert delivery.watermark(QUEUE_EXECUTE) == client.zscore(run_keys(RUN).waiting, "b")
    assert state.transition(RUN, "a", S.EXECUTED, "tok").moved  # waits for its grade message now
    assert client.zscore(run_keys(RUN).waiting, "a") is not None
    assert delivery.watermark(QUEUE_GRADE) == DRAINED
    time.sleep(0.01)  # a drained queue's watermark is now: messages sent before it have left
    assert delivery.overdue(RUN, delivery.watermarks()) == [("a", S.EXECUTED)]
    assert state.claim(RUN, "a", S.EXECUTED, S.GRADING, "t2", ttl_s=60)
    assert state.transition(RUN, "a", S.GRADED, "t2").moved
    assert client.zscore(run_keys(RUN).waiting, "a") is None
    for shard in ("b", "c"):  # claimed by some worker: the queue holds only stale messages
        assert state.claim(RUN, shard, S.QUEUED, S.EXECUTING, "x" + shard, ttl_s=60)
    assert delivery.watermark(QUEUE_EXECUTE) == NEVER


def test_a_reaped_or_handed_back_shard_waits_again_from_its_return(settings: Settings) -> None:
    client, state, _ = _submitted(settings, ["a", "b"])
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok", ttl_s=0.001)
    wait_until(lambda: state.reap(RUN) == [("a", S.QUEUED)], 5, what="lease expired and reaped")
    assert client.zscore(run_keys(RUN).waiting, "a") is not None
    assert state.claim(RUN, "b", S.QUEUED, S.EXECUTING, "t", ttl_s=60)
    assert state.release(RUN, "b", "t") is S.QUEUED
    assert client.zscore(run_keys(RUN).waiting, "b") is not None


def test_a_shard_taken_from_the_queue_just_now_is_not_overdue_however_old_its_send(settings: Settings) -> None:
    client, _, delivery = _submitted(settings, ["a", "b"])
    time.sleep(0.6)  # "a" waited in the queue longer than the bound
    delivery.watermarks_seen(0.5)
    client.rpop(QUEUE_EXECUTE)  # a live worker takes it now and is about to claim it
    time.sleep(0.2)
    marks = delivery.watermarks_seen(0.5)  # half a second ago "a" was still in the queue
    assert delivery.overdue(RUN, marks) == []


def test_a_restart_is_read_from_the_data_by_exactly_one_caller(settings: Settings) -> None:
    client, _, delivery = _submitted(settings, ["a"])
    assert client.get(server_key()) is not None  # the run's registration noted its server
    assert not delivery.restarted()  # the same server
    client.set(server_key(), "the-server-before-a-restart")
    assert [Delivery(client).restarted() for _ in range(3)] == [True, False, False]


def test_a_run_whose_every_shard_ended_unreduced_gets_its_reduce_again_once(settings: Settings) -> None:
    _, state, delivery = _submitted(settings, ["a"])
    assert not delivery.reduce_due(RUN, 0)  # a shard still waits
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok", ttl_s=60)
    assert state.transition(RUN, "a", S.EXECUTOR_FAILED, "tok").finished_run
    assert not delivery.reduce_due(RUN, 60)  # its mover's reduce may still be on the way
    assert delivery.reduce_due(RUN, 0)
    assert not delivery.reduce_due(RUN, 0.5)  # sent: not again within the bound
    state.mark_reduced(RUN)
    assert not delivery.reduce_due(RUN, 0)


def test_status_shows_waiting_shards_and_calls_a_run_with_nothing_moving_past_its_bound_stalled(
    settings: Settings,
) -> None:
    short = settings.model_copy(update={"redeliver_after_s": 3.0, "reaper_period_s": 0.25})
    _, state, _ = _submitted(short, ["a", "b"])
    # The viewer, given the same bound, says what status says.
    viewer = ViewerData(open_store(short.store), short.broker_url, stall_after_s=3.75)
    doc = run_status(RUN, short)
    assert (doc.waiting, doc.in_flight, doc.stalled, doc.stall_after_s) == (2, 0, False, 3.75)
    assert waiting_lines(doc)[0].startswith("waiting without a lease: 2 shards, the oldest sent")
    assert viewer._progress(RUN) == "running"
    time.sleep(4.0)
    doc = run_status(RUN, short)
    assert doc.stalled and doc.waiting_oldest_s is not None and doc.waiting_oldest_s > 3.75
    assert waiting_lines(doc)[1].startswith("STALLED: nothing in flight and no shard started or ended for")
    assert viewer._progress(RUN) == "stalled"
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok", ttl_s=60)
    doc = run_status(RUN, short)
    assert (doc.waiting, doc.in_flight, doc.stalled) == (1, 1, False)
    assert viewer._progress(RUN) == "running"


def test_a_run_whose_every_worker_died_mid_shard_is_stalled_once_the_leases_expired(settings: Settings) -> None:
    # Both shards executing, then their only worker killed: nothing waits in the ledger (the
    # leases still hold the shards) and no reaper runs to hand them back. A lease counts as in
    # flight only until its expiry.
    short = settings.model_copy(update={"redeliver_after_s": 0.5, "reaper_period_s": 0.1})
    _, state, _ = _submitted(short, ["a", "b"])
    viewer = ViewerData(open_store(short.store), short.broker_url, stall_after_s=0.8)
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok-a", ttl_s=60)
    assert state.claim(RUN, "b", S.QUEUED, S.EXECUTING, "tok-b", ttl_s=0.2)
    time.sleep(1.2)
    doc = run_status(RUN, short)  # a's lease is live: its worker may still be at it
    assert (doc.waiting, doc.lease_expired, doc.in_flight, doc.stalled) == (0, 1, 1, False)
    assert viewer._progress(RUN) == "running"
    assert state.expire_lease(RUN, "a", "tok-a")
    doc = run_status(RUN, short)
    assert (doc.waiting, doc.lease_expired, doc.in_flight, doc.stalled) == (0, 2, 0, True)
    assert waiting_lines(doc)[0] == "waiting without a lease: 0 shards; lease expired (worker gone): 2; in flight: 0"
    assert waiting_lines(doc)[1].startswith("STALLED: nothing in flight")
    assert viewer._progress(RUN) == "stalled"


def test_a_long_shard_whose_worker_just_died_is_no_stall_while_a_live_reaper_may_still_take_it_back(
    settings: Settings,
) -> None:
    short = settings.model_copy(update={"redeliver_after_s": 0.5, "reaper_period_s": 0.1})
    _, state, _ = _submitted(short, ["a"])
    assert state.claim(RUN, "a", S.QUEUED, S.EXECUTING, "tok", ttl_s=1.5)
    time.sleep(1.6)  # claimed longer ago than the bound; its lease expired a moment ago
    doc = run_status(RUN, short)
    assert (doc.lease_expired, doc.in_flight, doc.stalled) == (1, 0, False)
    assert state.reap(RUN) == [("a", S.QUEUED)]
    doc = run_status(RUN, short)  # handing it back is a move: the bound counts again from it
    assert (doc.waiting, doc.lease_expired, doc.stalled) == (1, 0, False)
    time.sleep(1.0)
    assert run_status(RUN, short).stalled  # and nothing took it since


def test_foreign_or_malformed_messages_at_a_queues_end_are_skipped_not_trusted(settings: Settings) -> None:
    client, _, delivery = _submitted(settings, ["a", "b"])
    for junk in (
        b"not json",
        b'{"body": "%%%", "properties": {"body_encoding": "base64"}}',
        b'{"body": "[[\\"r1\\", {\\"shard\\": 1}], {}, {}]"}',  # ids of the wrong shape
        b'{"body": "[[\\"r1\\", \\"no-such-shard\\"], {}, {}]"}',  # a shard the run never had
        b'{"body": "[[\\"other-run\\", \\"a\\"], {}, {}]"}',  # another run's name for the same id
    ):
        client.rpush(QUEUE_EXECUTE, junk)  # at the queue's end, where the oldest message sits
    assert delivery.watermark(QUEUE_EXECUTE) == client.zscore(run_keys(RUN).waiting, "a")

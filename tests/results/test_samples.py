"""A sample travels from a worker to the master as a row of its fields and comes back whole."""

from __future__ import annotations

from dataclasses import fields

from bench_plugin.results.samples import SAMPLE_FIELDS, Sample, pack_gaps


def test_a_row_holds_every_field_in_declaration_order_and_rebuilds_the_sample() -> None:
    sample = Sample(workload="llm", trial=3, segment=1, stage=7, seq=41, item=5, intended_s=10.0, sent_s=10.001,
                    end_s=10.5, ok=False, first_token_s=10.1, error="protocol", detail="cut off", status=200,
                    input_tokens=128, output_tokens=64, worker="w1", slot_wait_s=0.0, last_token_s=10.45,
                    chunk_gaps=pack_gaps([0.002, 0.003]), chunks=64, tokens_from="usage", stream_end="done")
    row = sample.to_row()
    assert isinstance(row, list)  # msgpack ships a list; the store's columns are SAMPLE_FIELDS
    assert row == [getattr(sample, f.name) for f in fields(Sample)]
    assert tuple(f.name for f in fields(Sample)) == SAMPLE_FIELDS
    assert Sample.from_row(row) == sample

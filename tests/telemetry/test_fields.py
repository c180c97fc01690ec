"""The metric catalogue: each field's unit is the one its HELP text names, so a table or a panel labelled from the
unit says what a dcgm-exporter's reader sees."""

from __future__ import annotations

import re

from bench_plugin.report.stage_series import unit
from bench_plugin.report.telemetry import PANELS
from bench_plugin.telemetry.fields import FIELDS, PROFILING_FIELDS


def test_each_field_s_unit_is_the_one_its_help_names() -> None:
    for name, field in FIELDS.items():
        found = re.findall(r"\(in ([^)]+)\)", field.help)
        assert found == [field.unit], (name, field.help, field.unit)
    assert {field.unit for field in PROFILING_FIELDS.values()} == {"ratio"}


def test_the_report_labels_its_series_with_the_catalogue_s_units() -> None:
    assert [panel.label for panel in PANELS] == ["GPU utilisation (%)", "VRAM used (MiB)",
                                                 "memory bandwidth utilisation (%)", "power (W)"]
    assert (unit("DCGM_FI_DEV_FB_USED"), unit("DCGM_FI_PROF_SM_ACTIVE"), unit("not_a_field")) == ("MiB", "ratio", "")

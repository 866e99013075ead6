"""Configuration: saved runs keep their meaning, presets stay what they name."""

import dataclasses

from dslide.config import PRESETS, TrainConfig, to_dict, train_from_dict


def test_a_run_saved_before_input_lr_resumes_with_one_step_size():
    saved = to_dict(TrainConfig(lr=5e-4))
    del saved["input_lr"]  # what a checkpoint written before the option holds
    assert train_from_dict(saved).input_lr == 5e-4


def test_a_saved_config_round_trips():
    cfg = TrainConfig(lr=2e-3, input_lr=7e-3, epochs=3)
    assert train_from_dict(to_dict(cfg)) == cfg


def test_the_slide_preset_uses_one_step_size_for_every_layer():
    assert PRESETS["slide"]["input_lr"] == PRESETS["slide"]["lr"] == 1e-4
    assert "input_lr" in {f.name for f in dataclasses.fields(TrainConfig)}

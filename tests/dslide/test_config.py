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


def test_auto_bits_scales_k_with_the_number_of_outputs():
    from dslide.config import LSHConfig, auto_bits

    dwta = LSHConfig()
    assert dwta.bits_per_table is None  # chosen per network
    # DWTA bins of 8 (3 bits a hash), 50 tables: 670,091 * 50 / 8**5 = 1,022 >= 1,000 > 670,091 * 50 / 8**6
    assert [auto_bits(n, dwta, 1000) for n in (670_091, 235_055, 40_000, 1_000)] == [5, 4, 3, 1]
    assert auto_bits(20, dwta, 1000) == 1
    assert auto_bits(670_091, LSHConfig(family="srp"), 1000) == 15  # 1 bit a hash: 670,091 * 50 / 2**15 = 1,022
    assert auto_bits(670_091, LSHConfig(family="learned", range_pow=12), 1000) == 12  # never more bits than buckets
    assert auto_bits(40_000, LSHConfig(num_tables=200), 1000) == 4


def test_the_sampler_resolves_k_from_every_rank_s_neurons():
    from dslide.config import LSHConfig, SamplingConfig, ScheduleConfig
    from dslide.sampler import OutputSampler

    # a rank holding a quarter of 670,091 neurons hashes with the K of the whole layer
    rank = OutputSampler(670_091 // 4, 670_091, 8, LSHConfig(), SamplingConfig(), ScheduleConfig(), hash_seed=0)
    assert rank.resolved_lsh().bits_per_table == 5
    # aimed at the active floor: 200 active -> K=4 at 40,000 outputs (40,000 * 50 / 8**4 = 488 >= 200)
    small_floor = OutputSampler(40_000, 40_000, 8, LSHConfig(), SamplingConfig(min_active=200), ScheduleConfig(), 0)
    assert small_floor.resolved_lsh().bits_per_table == 4
    fixed = OutputSampler(100, 670_091, 8, LSHConfig(bits_per_table=7), SamplingConfig(), ScheduleConfig(), 0)
    assert fixed.resolved_lsh().bits_per_table == 7

import pytest

from harness.cluster.emulated import Cluster, ClusterError
from harness.cluster.rates import RateError, parse_rate, tbf_burst_bytes


@pytest.mark.parametrize(
    ("text", "bits"),
    [("100mbit", 10**8), ("1gbit", 10**9), ("10GBIT", 10**10), ("2.5gbit", 25 * 10**8), (" 64kbit ", 64000)],
)
def test_rates_in_tc_units_parse_to_bits_per_second(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "is not a rate"),
        ("100", "is not a rate"),
        ("-1gbit", "is not a rate"),
        ("1gb", "unknown unit 'gb'"),
        ("100mbps", "bytes per second"),
        ("0mbit", "too low"),
        ("", "is not a rate"),
    ],
)
def test_bad_rates_are_refused_with_a_clear_message(text, message):
    with pytest.raises(RateError, match=message):
        parse_rate(text)


def test_a_cluster_with_a_bad_rate_is_refused_before_anything_is_created():
    with pytest.raises(RateError, match="unknown unit"):
        Cluster(2, "1 gigabit")


def test_burst_is_at_least_256_kib_and_grows_with_the_rate():
    assert tbf_burst_bytes(parse_rate("100mbit")) == 256 * 1024
    assert tbf_burst_bytes(parse_rate("10gbit")) == 10**10 // 8 // 500


def test_more_nodes_x_cores_than_the_machine_has_is_refused_unless_oversubscribed():
    with pytest.raises(ClusterError, match="--oversubscribe"):
        Cluster(64, "1gbit", cores_per_node=64)
    cluster = Cluster(64, "1gbit", cores_per_node=64, oversubscribe=True)
    assert cluster.oversubscribed


def test_bad_cluster_shapes_are_refused():
    with pytest.raises(ClusterError, match="nodes"):
        Cluster(0, "1gbit")
    with pytest.raises(ClusterError, match="mtu"):
        Cluster(2, "1gbit", mtu=100)

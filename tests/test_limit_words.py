"""A refusal under the limits fits where it is read (issue 34): the smallest limit that admits a
candidate, named by the CLI's flag, the page's Settings field or the server's setting."""

import pytest

from hugginggpt.costs.limits import Limits, refusal
from hugginggpt.stages.choice import Excluded
from webui.host.limit_words import for_page, for_server


def too_big(size: int) -> Excluded:
    return Excluded("tiny/model", "too big", "model_size", size)


@pytest.mark.parametrize(
    "size, suggested",
    [
        (618_000, "0.00062"),
        (500_000_000, "0.5"),
        (1_230_000_000, "1.3"),
        (12_300_000_000, "13"),
        (123e9, "130"),
    ],
)
def test_the_suggested_limit_is_the_smallest_that_admits_the_smallest_candidate(size, suggested):
    message = refusal("text-to-image", [too_big(size)], Limits(max_model_bytes=100))
    assert f"(--max-model-gb {suggested} would let it run)" in message
    assert float(suggested) * 1e9 >= size  # it admits the candidate


def test_each_door_names_the_limit_as_its_reader_sets_it():
    message = refusal("text-to-image", [too_big(618_000)], Limits(max_model_bytes=100))
    assert "(Largest model (GB) 0.00062 in Settings would let it run)" in for_page(message)
    assert "--max-model-gb" not in for_page(message)
    assert "(the server's max_model_gb 0.00062 would let it run)" in for_server(message)
    download = Excluded("tiny/model", "big download", "download", 2_000_000)
    message = refusal("text-to-image", [download], Limits(max_download_bytes=100))
    assert "(Most to download per request (GB) 0.002 in Settings would let it run)" in for_page(message)


def test_a_licence_refusal_does_not_deny_the_allowed_licence_of_a_candidate_left_out_for_its_size():
    limits = Limits(max_model_bytes=100, licenses=frozenset({"mit"}))
    licence = Excluded("big/apache", "its licence apache-2.0 is not allowed (mit)", "license", "apache-2.0")
    message = refusal("text-to-image", [too_big(618_000), licence], limits)
    assert "no candidate has an allowed licence" not in message
    assert (
        "the other candidates' licences are not allowed (mit); allowing apache-2.0 would let big/apache run"
        in message
    )
    alone = refusal("text-to-image", [licence], limits)
    assert "no candidate has an allowed licence (mit)" in alone

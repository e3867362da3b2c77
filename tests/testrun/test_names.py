"""Multi-SWE-bench's test names (its per-repository parsers' forms) matched to our parsers' ids."""

import json

from swedojo.schema import TestStatus
from swedojo.testrun.names import ListedMatch, match_listed
from swedojo.testrun.parsers import parse_log

JEST_IDS = [
    "timezone.test.js::TZ with Locale",
    "timezone.test.js::Diff (DST)",
    "timezone.test.js::Diff (DST) (2)",
    "retryer.test.js::Test Retryer > retryer should return value and have 2 retries",
    "utils.test.js::getCardColors: should fallback to specified theme colors if is not defined",
    "fetchStats.test.js::Test fetchStats > should fetch correct stats",
    "fetchStats.test.js::Test fetchStats > should throw error",
    "en.test.js",  # a file that failed to load: no test ran
]
MOCHA_IDS = [
    "res.redirect.js::res .redirect(url) should default to a 302 redirect",
    "res.redirect.js::res .redirect(status, url) should set the response status",
    "res.location.js::res .location(url) should accept an instance of URL",
    "res.status.js::res .status(code) should set the response status code to 201",
    "app.head.js::HEAD should default to GET",
    "app.router.js::app.router .:name? should denote an optional format",
]


def _rules(listed, seen, parser):
    found = match_listed(listed, seen, parser)
    return {name: (m.rule, m.ids) for name, m in found.matched.items()}, found.unmatched


def test_an_id_of_ours_matches_itself():
    rules, unmatched = _rules(["format-test", "compression/basic.sh"], ["format-test", "compression/basic.sh"], "ctest")
    assert rules == {"format-test": ("exact", ["format-test"]), "compression/basic.sh": ("exact", ["compression/basic.sh"])}
    assert unmatched == []


def test_a_mocha_full_title_matches_its_test():
    rules, _ = _rules(["res .redirect(status, url) should set the response status", "HEAD should default to GET",
                       "app.router .:name? should denote an optional format"], MOCHA_IDS, "mocha")
    assert rules["res .redirect(status, url) should set the response status"] == \
        ("full title", ["res.redirect.js::res .redirect(status, url) should set the response status"])
    assert rules["HEAD should default to GET"] == ("full title", ["app.head.js::HEAD should default to GET"])
    assert rules["app.router .:name? should denote an optional format"][0] == "full title"


def test_a_file_and_title_matches_the_title_or_its_last_part_in_that_file():
    rules, _ = _rules(["test/timezone.test.js:TZ with Locale",
                       "tests/retryer.test.js:retryer should return value and have 2 retries",
                       "tests/utils.test.js:getCardColors: should fallback to specified theme colors if is not defined"],
                      JEST_IDS, "jest")
    assert rules["test/timezone.test.js:TZ with Locale"] == ("file and title", ["timezone.test.js::TZ with Locale"])
    assert rules["tests/retryer.test.js:retryer should return value and have 2 retries"] == \
        ("file and title", ["retryer.test.js::Test Retryer > retryer should return value and have 2 retries"])
    assert rules["tests/utils.test.js:getCardColors: should fallback to specified theme colors if is not defined"][0] == \
        "file and title"


def test_jests_duplicate_counter_is_not_part_of_the_title():
    rules, _ = _rules(["test/timezone.test.js:Diff (DST)"], JEST_IDS, "jest")
    assert rules["test/timezone.test.js:Diff (DST)"] == \
        ("file and title", ["timezone.test.js::Diff (DST)", "timezone.test.js::Diff (DST) (2)"])


def test_a_bare_title_matches_every_test_whose_title_ends_with_it_after_the_parsers_separator():
    rules, _ = _rules(["should set the response status code to 201", "should accept an instance of URL",
                       "should set the response status"], MOCHA_IDS, "mocha")
    assert rules["should set the response status code to 201"] == \
        ("title suffix", ["res.status.js::res .status(code) should set the response status code to 201"])
    assert rules["should accept an instance of URL"][0] == "title suffix"
    assert rules["should set the response status"] == \
        ("title suffix", ["res.redirect.js::res .redirect(status, url) should set the response status"])
    jest, unmatched = _rules(["should throw error", "throw error"], JEST_IDS, "jest")
    assert jest["should throw error"] == ("title suffix", ["fetchStats.test.js::Test fetchStats > should throw error"])
    assert unmatched == ["throw error"]  # not a whole title: the separator must precede it


def test_a_title_suffix_needs_a_parser_whose_separator_is_known():
    _, unmatched = _rules(["should throw error"], JEST_IDS, "")
    assert unmatched == ["should throw error"]


def test_a_file_names_all_of_its_tests_and_a_file_that_failed_to_load_itself():
    rules, _ = _rules(["tests/fetchStats.test.js", "test/locale/en.test.js"], JEST_IDS, "jest")
    assert rules["tests/fetchStats.test.js"] == ("whole file", ["fetchStats.test.js::Test fetchStats > should fetch correct stats",
                                                                "fetchStats.test.js::Test fetchStats > should throw error"])
    assert rules["test/locale/en.test.js"] == ("script name", ["en.test.js"])


def test_a_script_name_matches_an_id_that_is_the_same_path_longer_or_shorter():
    seen = ["tests/cli-tests/compression/basic.sh", "basic/help.sh", "build/bin/format-test"]
    rules, unmatched = _rules(["compression/basic.sh", "cli-tests/basic/help.sh", "format-test", "all tests", "help.sh"],
                              seen, "automake")
    assert rules == {"compression/basic.sh": ("script name", ["tests/cli-tests/compression/basic.sh"]),
                     "cli-tests/basic/help.sh": ("script name", ["basic/help.sh"]),
                     "format-test": ("script name", ["build/bin/format-test"]),
                     "help.sh": ("script name", ["basic/help.sh"])}
    assert unmatched == ["all tests"]  # a name for the whole run, which no parser of ours gives


def test_the_first_rule_that_matches_wins():
    seen = ["a.test.js::should work", "a.test.js::Suite > should work"]
    rules, _ = _rules(["should work"], seen, "jest")
    assert rules["should work"] == ("full title", ["a.test.js::should work"])


def test_names_are_matched_once_in_listed_order():
    found = match_listed(["x", "format-test", "x"], ["format-test"], "ctest")
    assert found.unmatched == ["x"]
    assert found.matched == {"format-test": ListedMatch(rule="exact", ids=["format-test"])}


def test_a_title_is_matched_whatever_its_trailing_white_space() -> None:
    """The source's title `'should contain app settings '` ends with a space; a benchmark's parser,
    reading it from a log line, lists it without."""
    seen = ["app.locals.js::app.locals .settings should contain app settings "]
    found = match_listed(["should contain app settings"], seen, "mocha")
    assert found.unmatched == [] and found.matched["should contain app settings"].ids == seen


def test_two_test_files_of_one_name_in_two_directories_stay_two_files():
    """Seen on a jest suite (`test/timezone.test.js` passes, `test/plugin/timezone.test.js` fails at
    the commit): with ids keeping a file's name alone, the listed passing file took the other's
    failures and gold was graded unresolved. Ids keep the path from the work tree (the run strips
    the work tree's own path from the log)."""
    def suite(name, status):
        return {"name": name, "status": status, "assertionResults": [
            {"ancestorTitles": ["DST"], "title": "Diff (DST)", "status": status}]}

    report = {"numTotalTests": 2, "numPassedTests": 1, "numFailedTests": 1, "numPendingTests": 0,
              "testResults": [suite("test/timezone.test.js", "passed"), suite("test/plugin/timezone.test.js", "failed")]}
    statuses = parse_log("jest", json.dumps(report))
    assert statuses == {"test/timezone.test.js::DST > Diff (DST)": TestStatus.PASSED,
                        "test/plugin/timezone.test.js::DST > Diff (DST)": TestStatus.FAILED}
    rules, unmatched = _rules(["test/timezone.test.js", "test/plugin/timezone.test.js:Diff (DST)"], statuses, "jest")
    assert rules == {"test/timezone.test.js": ("whole file", ["test/timezone.test.js::DST > Diff (DST)"]),
                     "test/plugin/timezone.test.js:Diff (DST)": (
                         "file and title", ["test/plugin/timezone.test.js::DST > Diff (DST)"])}
    assert unmatched == []
    # a name given from a package's directory still finds its file; a file's name alone names both
    rules, _ = _rules(["plugin/timezone.test.js", "timezone.test.js"], statuses, "jest")
    assert rules["plugin/timezone.test.js"][1] == ["test/plugin/timezone.test.js::DST > Diff (DST)"]
    assert len(rules["timezone.test.js"][1]) == 2

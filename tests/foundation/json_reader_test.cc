#include "core/json_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace strata::json {
namespace {

TEST(JsonReader, MalformedJsonGivesLineAndColumn) {
  try {
    parse_text("{\n  \"a\": 1,\n  \"b\": ]\n}", "x.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "x.json:3:8");
    EXPECT_NE(e.message().find("malformed JSON"), std::string::npos);
  }
}

TEST(JsonReader, UnknownKeyIsNamedWithSuggestion) {
  nlohmann::json doc = nlohmann::json::parse(R"({"num_layer": 3})");
  ObjectReader r(doc, "m.json");
  r.integer_or("num_layers", 1, 1, 10);
  try {
    r.finish();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.num_layer");
    EXPECT_NE(e.message().find("did you mean \"num_layers\""), std::string::npos) << e.what();
  }
}

TEST(JsonReader, IntegerRejectsFloatsStringsAndBooleans) {
  for (const char* text : {R"({"x": 3.5})", R"({"x": "3"})", R"({"x": true})"}) {
    nlohmann::json doc = nlohmann::json::parse(text);
    ObjectReader r(doc, "f.json");
    EXPECT_THROW(r.integer("x", 0, 10), InputError) << text;
  }
}

TEST(JsonReader, RangeErrorsNameThePathAndBounds) {
  nlohmann::json doc = nlohmann::json::parse(R"({"fabric": {"oversubscription": 0.5}})");
  ObjectReader r(doc, "c.json");
  ObjectReader f = r.object("fabric");
  try {
    f.number("oversubscription", 1.0, 64.0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.fabric.oversubscription");
    EXPECT_NE(e.message().find("[1, 64]"), std::string::npos) << e.what();
  }
}

TEST(JsonReader, ChoiceListsAllowedValues) {
  nlohmann::json doc = nlohmann::json::parse(R"({"schedule": "zb"})");
  ObjectReader r(doc, "p.json");
  try {
    r.choice("schedule", {"gpipe", "1f1b"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("\"gpipe\", \"1f1b\""), std::string::npos) << e.what();
  }
}

TEST(JsonReader, MissingRequiredKey) {
  nlohmann::json doc = nlohmann::json::parse(R"({})");
  ObjectReader r(doc, "p.json");
  try {
    r.integer("tp", 1, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.tp");
    EXPECT_NE(e.message().find("missing"), std::string::npos);
  }
}


// nlohmann::json keeps the last of two equal keys without a word; a user who
// wrote "tp" twice would simulate a plan they did not mean.
TEST(JsonReader, DuplicateKeyIsAnErrorAtItsPath) {
  try {
    parse_text(R"({"a": {"b": 1, "c": [0, {"k": 1, "k": 2}]}})", "d.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "d.json");
    EXPECT_EQ(e.json_path(), "$.a.c[1].k");
    EXPECT_NE(e.message().find("duplicate key"), std::string::npos) << e.what();
  }
}

TEST(JsonReader, SameKeyInSiblingObjectsIsFine) {
  nlohmann::json doc = parse_text(R"({"x": {"k": 1}, "y": {"k": 2}, "z": [{"k": 3}, {"k": 4}]})", "ok.json");
  EXPECT_EQ(doc["z"][1]["k"], 4);
}

// Nested 100,000 deep, a file used to crash every loader that described the
// value it refused (recursing through it); now the parse refuses it first.
TEST(JsonReader, DeepNestingIsRefusedBeforeAnythingIsBuilt) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_text(deep, "deep.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "deep.json");
    EXPECT_NE(e.message().find("nested deeper than 256"), std::string::npos) << e.what();
  }
  // 256 levels is the limit, not an error.
  EXPECT_NO_THROW(parse_text(std::string(256, '[') + std::string(256, ']'), "ok.json"));
}

TEST(JsonReader, NanAndInfinitySayWhatIsWrong) {
  for (const char* text : {R"({"x": NaN})", R"({"x": Infinity})", "[1, -Infinity]"}) {
    try {
      parse_text(text, "n.json");
      FAIL() << text;
    } catch (const InputError& e) {
      EXPECT_NE(e.message().find("NaN and Infinity are not JSON numbers"), std::string::npos)
          << text << ": " << e.what();
    }
  }
}

// Found by the fuzz targets (tests/fuzz): nlohmann reports a number past a
// double's range as out_of_range, which escaped every loader as an internal error.
TEST(JsonReader, NumberBeyondADoubleIsAnInputErrorAtItsPlace) {
  try {
    parse_text("{\n  \"tp\": 2,\n  \"pp\": 1e309\n}", "o.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "o.json:3:9");
    EXPECT_EQ(e.message(), "number out of range: 1e309 is beyond a double's largest, about 1.8e308");
  }
  EXPECT_THROW(parse_text("[-2e308]", "o.json"), InputError);
  // The largest double itself is a number.
  EXPECT_EQ(parse_text("[1.7976931348623157e308]", "o.json")[0].get<double>(), 1.7976931348623157e308);
}

TEST(JsonReader, WrongTypedContainerIsDescribedNotDumped) {
  nlohmann::json doc = nlohmann::json::parse(R"({"tp": [1, 2, 3]})");
  ObjectReader r(doc, "p.json");
  try {
    r.integer("tp", 1, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("an array (of 3 elements)"), std::string::npos) << e.what();
  }
}

// A FIFO would block the reader forever, /dev/zero would read until memory runs
// out, a directory would read as malformed JSON: each is refused by what it is.
TEST(JsonReader, ParseFileRefusesWhatIsNotARegularFile) {
  const std::string dir = ::testing::TempDir() + "strata-json-reader-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/pipe.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string loop = dir + "/loop.json";
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir, "is a directory"}, {fifo, "FIFO"}, {"/dev/zero", "device"}, {loop, "loop"},
      {dir + "/absent.json", "does not exist"}};
  for (const auto& [path, says] : cases) {
    try {
      parse_file(path);
      ADD_FAILURE() << path << " was read";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), path);
      EXPECT_NE(e.message().find(says), std::string::npos) << path << ": " << e.what();
    }
  }
  ::unlink(loop.c_str());
  ::unlink(fifo.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace strata::json

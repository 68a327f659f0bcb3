#include "core/json_reader.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace strata::json

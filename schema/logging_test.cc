#include "schema/logging.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>

#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace tessel {
namespace {

TEST(LoggingTest, JsonFormatWritesOneParsableObjectPerLineWhateverTheMessageHolds) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::set_default_logger(logger);
  ASSERT_TRUE(ConfigureLogging("json", "info").ok());
  spdlog::info("job {} name \"{}\"\nforged line \x1b[31m\\", 7, "a\"b");
  spdlog::debug("not shown at info");
  const std::string text = out.str();
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  const nlohmann::json line = nlohmann::json::parse(text);
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["logger"], "test");
  EXPECT_EQ(line["msg"], "job 7 name \"a\"b\"\nforged line \x1b[31m\\");
}

TEST(LoggingTest, UnknownFormatsAndLevelsAreRefusedByName) {
  EXPECT_NE(ConfigureLogging("xml", "info").message().find("--log-format 'xml'"),
            std::string::npos);
  EXPECT_NE(ConfigureLogging("text", "loud").message().find("--log-level 'loud'"),
            std::string::npos);
  EXPECT_TRUE(ConfigureLogging("text", "warn").ok());
}

}  // namespace
}  // namespace tessel

// Tests for the SQLite wrapper: opens, statements, transactions and the status codes of failures.
#include "schema/sqlite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace tessel::sqlite {
namespace {

using ::testing::HasSubstr;

class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("sqlite_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "test.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A created database with table t(k TEXT PRIMARY KEY, v INTEGER, d REAL).
  std::unique_ptr<Database> Created(OpenOptions options = {.create = true}) {
    auto db = Database::Open(path_, options);
    EXPECT_TRUE(db.ok()) << db.status();
    EXPECT_TRUE(
        (*db)
            ->ExecScript("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER, d REAL);", "schema")
            .ok());
    return *std::move(db);
  }

  int64_t Count(Database& db) {
    auto count = db.Prepare("SELECT COUNT(*) FROM t");
    EXPECT_TRUE(count.ok()) << count.status();
    EXPECT_TRUE(*count->Step());
    return count->Int(0);
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST(SqliteCodeTest, ExtendedCodesRefineTheirPrimaryCode) {
  EXPECT_EQ(SqliteCode(SQLITE_CONSTRAINT_PRIMARYKEY), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SqliteCode(SQLITE_CONSTRAINT_UNIQUE), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SqliteCode(SQLITE_CONSTRAINT_FOREIGNKEY), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SqliteCode(SQLITE_CONSTRAINT_NOTNULL), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SqliteCode(SQLITE_BUSY_SNAPSHOT), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteCode(SQLITE_READONLY), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SqliteCode(SQLITE_NOTADB), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteCode(SQLITE_ERROR), absl::StatusCode::kInternal);
}

TEST_F(SqliteTest, OpeningAMissingFileWithoutCreateFailsNamingThePath) {
  auto db = Database::Open(path_, {});
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(path_));
  EXPECT_FALSE(std::filesystem::exists(path_));
  auto read_only = Database::Open(path_, {.read_only = true, .create = true});
  ASSERT_FALSE(read_only.ok());
  EXPECT_FALSE(std::filesystem::exists(path_)) << "read_only never creates";
}

TEST_F(SqliteTest, BindsAndReadsBackEveryColumnType) {
  auto db = Created();
  {
    auto insert = db->Prepare("INSERT INTO t (k, v, d) VALUES (?, ?, ?)");
    ASSERT_TRUE(insert.ok()) << insert.status();
    insert->BindText(std::string("a\0b", 3)).BindInt(int64_t{1} << 40).BindDouble(2.5);
    ASSERT_TRUE(insert->Run().ok());
    EXPECT_EQ(db->Changes(), 1);
    EXPECT_EQ(db->LastInsertRowId(), 1);
  }
  {
    auto again = db->Prepare("INSERT INTO t (k, v, d) VALUES (?, ?, ?)");  // the cached one
    again->BindText("c").BindOptionalInt(std::nullopt).BindOptionalDouble(std::nullopt);
    ASSERT_TRUE(again->Run().ok());
  }
  auto select = db->Prepare("SELECT k, v, d FROM t ORDER BY k");
  ASSERT_TRUE(select.ok());
  ASSERT_TRUE(*select->Step());
  EXPECT_EQ(select->Text(0), std::string("a\0b", 3));
  EXPECT_EQ(select->Int(1), int64_t{1} << 40);
  EXPECT_EQ(select->Double(2), 2.5);
  EXPECT_FALSE(select->IsNull(1));
  ASSERT_TRUE(*select->Step());
  EXPECT_EQ(select->Text(0), "c");
  EXPECT_TRUE(select->IsNull(1));
  EXPECT_TRUE(select->IsNull(2));
  EXPECT_EQ(select->Text(1), "");
  EXPECT_FALSE(*select->Step());
}

TEST_F(SqliteTest, AStatementIsResetWhenReleasedSoItCanBeReusedFromTheStart) {
  auto db = Created();
  ASSERT_TRUE(
      db->ExecScript("INSERT INTO t (k) VALUES ('x'); INSERT INTO t (k) VALUES ('y');", "rows")
          .ok());
  for (int round = 0; round < 2; ++round) {
    auto select = db->Prepare("SELECT k FROM t ORDER BY k");
    ASSERT_TRUE(select.ok());
    ASSERT_TRUE(*select->Step());
    EXPECT_EQ(select->Text(0), "x") << "round " << round;
  }
}

TEST_F(SqliteTest, ConstraintViolationsMapToStatusCodesWithTheSqliteMessage) {
  auto db = Created();
  ASSERT_TRUE(db->Exec("INSERT INTO t (k) VALUES ('dup')").ok());
  absl::Status again = db->Exec("INSERT INTO t (k) VALUES ('dup')");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.message()), HasSubstr("UNIQUE constraint failed: t.k"));
  EXPECT_THAT(std::string(again.message()), HasSubstr(path_));

  auto bad = db->Prepare("SELECT nosuchcolumn FROM t");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no such column: nosuchcolumn"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("preparing"));

  absl::Status script = db->ExecScript("CREATE TABLE t (x);", "migration 7");
  EXPECT_THAT(std::string(script.message()), HasSubstr("migration 7 on database"));
  EXPECT_THAT(std::string(script.message()), HasSubstr("already exists"));
}

TEST_F(SqliteTest, ABindErrorIsReportedByStep) {
  auto db = Created();
  auto insert = db->Prepare("INSERT INTO t (k) VALUES (?)");
  ASSERT_TRUE(insert.ok());
  insert->BindText("a").BindInt(2);  // one parameter too many
  absl::StatusOr<bool> step = insert->Step();
  ASSERT_FALSE(step.ok());
  EXPECT_THAT(std::string(step.status().message()), HasSubstr("binding a parameter"));
  EXPECT_EQ(Count(*db), 0);
}

TEST_F(SqliteTest, ATransactionRollsBackUnlessCommitted) {
  auto db = Created();
  {
    auto transaction = Transaction::Begin(*db);
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    EXPECT_TRUE(db->InTransaction());
    ASSERT_TRUE(db->Exec("INSERT INTO t (k) VALUES ('dropped')").ok());
  }
  EXPECT_FALSE(db->InTransaction());
  EXPECT_EQ(Count(*db), 0);
  {
    auto transaction = Transaction::Begin(*db, /*immediate=*/true);
    ASSERT_TRUE(transaction.ok());
    ASSERT_TRUE(db->Exec("INSERT INTO t (k) VALUES ('kept')").ok());
    EXPECT_TRUE(transaction->Commit().ok());
    EXPECT_EQ(transaction->Commit().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_FALSE(db->InTransaction());
  EXPECT_EQ(Count(*db), 1);
}

TEST_F(SqliteTest, SetupOptionsTakeEffect) {
  auto db = Created({.create = true,
                     .busy_timeout_ms = 50,
                     .foreign_keys = true,
                     .wal = true,
                     .synchronous = Synchronous::kNormal});
  auto pragma = [&](const char* sql) {
    auto stmt = db->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    EXPECT_TRUE(*stmt->Step());
    return stmt->Text(0);
  };
  EXPECT_EQ(pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma("PRAGMA foreign_keys"), "1");
  EXPECT_EQ(pragma("PRAGMA synchronous"), "1");  // NORMAL
  EXPECT_EQ(pragma("PRAGMA busy_timeout"), "50");
}

TEST_F(SqliteTest, ReadOnlyAndQueryOnlyConnectionsRefuseWrites) {
  Created();
  auto read_only = Database::Open(path_, {.read_only = true});
  ASSERT_TRUE(read_only.ok()) << read_only.status();
  EXPECT_EQ(Count(**read_only), 0);
  EXPECT_EQ((*read_only)->Exec("INSERT INTO t (k) VALUES ('x')").code(),
            absl::StatusCode::kPermissionDenied);

  auto query_only = Database::Open(path_, {.query_only = true});
  ASSERT_TRUE(query_only.ok()) << query_only.status();
  absl::Status write = (*query_only)->Exec("INSERT INTO t (k) VALUES ('x')");
  EXPECT_FALSE(write.ok());
  EXPECT_THAT(std::string(write.message()), HasSubstr("readonly"));
}

TEST_F(SqliteTest, ANonDatabaseFileIsDataLoss) {
  {
    std::FILE* file = std::fopen(path_.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("this is not a database, just text long enough to have a header........", file);
    std::fclose(file);
  }
  auto db = Database::Open(path_, {.read_only = true});
  ASSERT_TRUE(db.ok()) << "SQLite opens lazily";
  auto select = (*db)->Prepare("SELECT 1 FROM sqlite_master");
  ASSERT_FALSE(select.ok());
  EXPECT_EQ(select.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tessel::sqlite

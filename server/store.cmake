# tessel_store: the SQLite store (server/store.h). Included by server/CMakeLists.txt.
add_library(tessel_store STATIC ${CMAKE_CURRENT_LIST_DIR}/store.cc)
target_link_libraries(tessel_store
  PUBLIC tessel_schema absl::status absl::statusor absl::synchronization
  PRIVATE SQLite::SQLite3 fmt::fmt nlohmann_json::nlohmann_json Threads::Threads)

tessel_add_test(store_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_test.cc
                LIBS tessel_store SQLite::SQLite3 Threads::Threads)

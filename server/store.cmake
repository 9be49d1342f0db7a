# tessel_store: the SQLite store (server/store.h), over schema/sqlite.h. Included by
# server/CMakeLists.txt.
add_library(tessel_store STATIC ${CMAKE_CURRENT_LIST_DIR}/store.cc
                                ${CMAKE_CURRENT_LIST_DIR}/store_impl.cc
                                ${CMAKE_CURRENT_LIST_DIR}/store_admin.cc)
target_link_libraries(tessel_store
  PUBLIC tessel_schema absl::status absl::statusor absl::synchronization
  PRIVATE tessel_sqlite fmt::fmt nlohmann_json::nlohmann_json Threads::Threads)

tessel_add_test(store_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_test.cc
                LIBS tessel_store tessel_sqlite tessel_testing_temp_dir Threads::Threads)
tessel_add_test(store_admin_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/store_admin_test.cc
                LIBS tessel_store tessel_sqlite tessel_testing_temp_dir Threads::Threads)

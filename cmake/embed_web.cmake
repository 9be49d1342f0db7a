# Writes a C++ source with the dashboard's web files (server/web) as raw string literals.
# Inputs: OUT (path of the .cc to write), FILES (the files, sorted, separated by "|").
include(${CMAKE_CURRENT_LIST_DIR}/embed_write.cmake)
string(REPLACE "|" ";" FILES "${FILES}")
set(entries "")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  file(READ ${f} text)
  string(APPEND entries "      {\"${name}\", R\"tessel_web(${text})tessel_web\"},\n")
endforeach()
tessel_write_embedded(${OUT} embed_web.cmake server/web server/dashboard.h tessel::server
                      "std::pair<std::string, std::string>" EmbeddedWebFiles "${entries}")

# Writes a C++ source with every sim target file as a raw string literal.
# Inputs: OUT (path of the .cc to write), FILES (the .json files, sorted, separated by "|").
include(${CMAKE_CURRENT_LIST_DIR}/embed_write.cmake)
string(REPLACE "|" ";" FILES "${FILES}")
set(entries "")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} text)
  string(APPEND entries "      {\"${name}\", R\"tessel_json(${text})tessel_json\"},\n")
endforeach()
tessel_write_embedded(${OUT} embed_targets.cmake sim/targets sim/target.h tessel::sim
                      "std::pair<std::string, std::string>" EmbeddedTargetFiles "${entries}")

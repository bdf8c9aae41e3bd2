#ifndef OVERTIME_CYAML_SHIM_H
#define OVERTIME_CYAML_SHIM_H
// libyaml, as Debian's libyaml-dev (0.2.5) ships it: its event parser reads YAML job files.
// Only OvertimeYAML imports it.
#include <yaml.h>
#endif

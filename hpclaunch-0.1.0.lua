-- Lmod modulefile for hpclaunch 0.1.0, written by `cmake --install` (packaging/lmod/).
--   module use /tmp/tmp.rKNjpSDzVE/opt/hpclaunch/modulefiles ; module load hpclaunch
help([[
hpclaunch 0.1.0: presets and cluster profiles -> reviewable sbatch scripts -> submit,
follow, sweep, tune. Try: hpclaunch presets list; man hpclaunch.
Presets and templates: /tmp/tmp.rKNjpSDzVE/opt/hpclaunch/share/hpclaunch (HPCLAUNCH_DATA_DIR); your own under
~/.config/hpclaunch or HPCLAUNCH_PATH.
]])
whatis("Name: hpclaunch")
whatis("Version: 0.1.0")
whatis("Description: declarative presets and cluster profiles -> reviewed sbatch scripts")

local prefix = "/tmp/tmp.rKNjpSDzVE/opt/hpclaunch"
prepend_path("PATH", pathJoin(prefix, "bin"))
-- An unset MANPATH means man's own search path; a trailing empty entry keeps it (man-db).
local manpath_unset = os.getenv("MANPATH") == nil
prepend_path("MANPATH", pathJoin(prefix, "share/man"))
if manpath_unset and mode() == "load" then
  append_path("MANPATH", "")
end
-- The built-in presets and templates the launcher reads (also found beside the binary).
setenv("HPCLAUNCH_DATA_DIR", pathJoin(prefix, "share/hpclaunch"))
-- bash-completion loads completions/hpclaunch from every XDG_DATA_DIRS entry on first use.
-- Unset, the variable means /usr/local/share:/usr/share (XDG Base Directory): keep them.
if os.getenv("XDG_DATA_DIRS") == nil and mode() == "load" then
  append_path("XDG_DATA_DIRS", "/usr/local/share")
  append_path("XDG_DATA_DIRS", "/usr/share")
end
prepend_path("XDG_DATA_DIRS", pathJoin(prefix, "share"))
-- zsh: _hpclaunch on fpath (run compinit again, or start a new shell, to pick it up).
prepend_path("FPATH", pathJoin(prefix, "share/zsh/site-functions"))

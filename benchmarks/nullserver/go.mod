module benchplugin/nullserver

go 1.22

module github.com/toolplane/toolplane/toolkit

go 1.26

require (
	github.com/fsnotify/fsnotify v1.9.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/tailscale/hujson v0.0.0-20260727124030-b80ff77dac4f
	golang.org/x/text v0.14.0
)

require golang.org/x/sys v0.13.0 // indirect

module github.com/toolplane/toolplane/toolkit

go 1.26

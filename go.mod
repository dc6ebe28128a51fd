module github.com/kmirror/kmirror

go 1.26.8

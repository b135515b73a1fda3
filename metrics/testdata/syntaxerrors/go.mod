module example.com/syntaxerrors

go 1.22

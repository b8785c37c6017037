module zz.example/late

go 1.21

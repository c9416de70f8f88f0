from django.shortcuts import render


def workbench(request):
    return render(request, "placeholder.html", {"title": "Workbench"})


def inspect(request):
    return render(request, "placeholder.html", {"title": "Inspect"})


def history(request):
    return render(request, "placeholder.html", {"title": "History"})

